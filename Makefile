# Build/test entry points of deuz_transcripts. `make test` is the test command.
# Tests run on the database given by DATABASE_URL (default: SQLite, see testproject/settings.py).

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
BENCH_ARGS ?=
POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/test

.PHONY: venv test test-postgres run lint bench clean

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
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis .ruff_cache staticfiles bench/out
	rm -f db.sqlite3 db.sqlite3-journal db.sqlite3-wal db.sqlite3-shm
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
