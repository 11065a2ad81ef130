# specgen: `make codegen` regenerates generated/, `make test` runs the tests.
# The first target that needs it creates .venv and installs the project with the
# pinned dev constraints, so both commands work on a fresh clone.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
CONSTRAINTS := constraints-dev.txt

.PHONY: all venv test flow codegen check fuzz bench mypy lint clean

all: test

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) -e ".[codegen,test]"
	touch $(STAMP)

venv: $(STAMP)

# Two worker processes (pytest-xdist): this machine's two cores. TEST_WORKERS=0 runs the
# suite in one process (what `pytest` alone does); the property depth is the same.
TEST_WORKERS ?= 2

# The weekly flow (tests/test_weekly_flow.py: the whole suite again, in a copy with a row of
# every kind, group, default and position added) is `make flow`, run by CI after this.
test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not copies_the_suite"

# The weekly flow alone: README's additions and the class of ordinary ones in a copy of
# the repository, `make codegen` there, then the suite, `make check` and `make mypy` there
# (about two and a half minutes).
flow: $(STAMP)
	$(BIN)/python -m pytest -m copies_the_suite -p no:cacheprovider tests/test_weekly_flow.py

# Regenerate generated/ from the field table and templates/ (never imports torch).
codegen: $(STAMP)
	$(BIN)/python -m generator generate

# Fail with a diff and the fix if generated/ drifted from the table or templates.
check: $(STAMP)
	$(BIN)/python -m generator check

# generated/ must pass mypy --strict: it is code a reviewer reads like hand-written code.
mypy: $(STAMP)
	$(BIN)/python -m mypy --strict generated/ shardplan/ generator/

# ruff (rules F, I, B, UP: pyproject.toml) over hand-written and generated code alike.
lint: $(STAMP)
	$(BIN)/ruff check .

# The long property run: 50,000 examples a property (tests/conftest.py, profile "fuzz").
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest tests/generated/test_fidelity.py -p no:cacheprovider

# Side-by-side timings (not part of `make test`): writes docs/bench-results.md (commit it)
# and benchmarks/results.json. BENCH_ARGS="--huge --before REV": also about 500k modules,
# here and at REV. See docs/performance.md.
bench: $(STAMP)
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache build *.egg-info
