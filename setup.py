"""What pyproject.toml cannot say: the suite in benchmarks/ ships inside the package as ``pytest_medhelm.suite``.

benchmarks/ stays the one copy of the suite's test modules (``pytest benchmarks`` from a checkout); the wheel maps it
to ``pytest_medhelm/suite`` so that an installed plugin runs it with ``pytest --pyargs pytest_medhelm.suite``.
Every other setting is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

SUITE = "pytest_medhelm.suite"

setup(
    # namespace packages too (a folder without __init__.py, like pytest_medhelm/report, is a package as well)
    packages=find_namespace_packages(include=["pytest_medhelm", "pytest_medhelm.*"], exclude=["*__pycache__*"])
    + [SUITE] + [f"{SUITE}.{name}" for name in find_namespace_packages("benchmarks", exclude=["*__pycache__*"])],
    package_dir={SUITE: "benchmarks"},
)
