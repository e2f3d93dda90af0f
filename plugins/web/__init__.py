"""Bundled web providers: one folder each, with plugin.yaml, __init__.py (register) and provider.py."""
