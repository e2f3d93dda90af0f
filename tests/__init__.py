import pytest

# Shared test bodies live outside test_*.py files; without this their failed asserts show no values.
pytest.register_assert_rewrite("tests.support.provider_cases")
