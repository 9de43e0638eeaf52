# Build/test entry points of deuz_transcripts. `make test` is the test command.
# Tests run on the database given by DATABASE_URL (default: SQLite, see testproject/settings.py).

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
BENCH_ARGS ?=
POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/test

.PHONY: venv test test-postgres test-sqlite-new run lint bench clean

venv: $(VENV)/.installed

# Re-installs whenever pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e '.[dev]'
	touch $@

test: venv
	$(BIN)/pytest $(PYTEST_ARGS)

test-postgres: venv
	DATABASE_URL=$(POSTGRES_URL) DEUZ_REQUIRE_POSTGRES=1 $(BIN)/pytest $(PYTEST_ARGS)

# The SQLite tests again on a newer SQLite than the system's (FTS5 `secure-delete` needs
# 3.42+; Debian 12 has 3.40): the pysqlite3-binary wheel, installed beside the venv (not
# into it) and swapped in for `sqlite3` by testproject/settings.py (DEUZ_SQLITE_MODULE).
SQLITE_NEW := .sqlite-new
SQLITE_NEW_TESTS ?= tests/test_deletes.py tests/contract tests/test_concurrency.py

$(SQLITE_NEW)/.installed:
	$(BIN)/python -m pip install --target $(SQLITE_NEW) pysqlite3-binary
	touch $@

test-sqlite-new: venv $(SQLITE_NEW)/.installed
	PYTHONPATH=$(SQLITE_NEW) DEUZ_SQLITE_MODULE=pysqlite3 $(BIN)/pytest $(PYTEST_ARGS) $(SQLITE_NEW_TESTS)

run: venv
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py load_demo_transcripts --if-empty
	$(BIN)/python manage.py runserver 127.0.0.1:8000

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The bench extras (peers: django-watson, modelsearch, tantivy) are installed once, on demand.
$(VENV)/.bench-installed: pyproject.toml $(VENV)/.installed
	$(BIN)/pip install -e '.[dev,bench]'
	touch $@

bench: venv $(VENV)/.bench-installed
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis .ruff_cache staticfiles bench/out $(SQLITE_NEW)
	rm -f db.sqlite3 db.sqlite3-journal db.sqlite3-wal db.sqlite3-shm
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
