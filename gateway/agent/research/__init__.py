"""Deep research: a second agent loop over the same web tools, driven stage by stage by the gateway.

A research model id (`<model>-deep-research`) puts a turn here instead of the tool-calling loop. The
gateway asks the model plain questions with its own prompts and reads the answers leniently (lines,
numbers, a JSON list if that is what came), so a model weak at tool calling or JSON still completes a
run: a brief and sub-questions (plan.py), searches and page reads for several sub-questions at once,
each page condensed into a note (gather.py, notes.py), reflection on the gaps for a bounded number of
rounds (plan.py), then a report (report.py) whose citations are checked against what the run read
(checks.py) before the client sees it. Budgets of calls, wall time and tokens (budgets.py) end the
searching early, never the report. run.py puts the stages together and yields the agent's events.
"""
