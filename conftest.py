"""Root conftest: registers the conformance suite's options (--impl, --profile, --conformance-report)
so they are accepted whatever paths pytest is given. Nothing else belongs here."""

from conformance.options import register


def pytest_addoption(parser):
    register(parser)
