# Build/test entry points of deuz_transcripts. `make test` is the test command.
# Tests run on the database given by DATABASE_URL (default: SQLite, see testproject/settings.py).
#
# Another interpreter or Django release runs in its own virtualenv, e.g. (what .ci/run does):
#   make test PYTHON=python3.13 VENV=.venv-dj60 DJANGO='Django>=6.0,<6.1'
# PYTHON creates VENV (recreated if it holds another Python version); DJANGO is the Django
# requirement installed with the dev extras (empty: whatever pip picks within pyproject's range).

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV ?= .venv
DJANGO ?=
BIN := $(VENV)/bin
PYTEST_ARGS ?=
BENCH_ARGS ?=
POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/test
# The hot standby of POSTGRES_URL's server that `make pg-replica` makes (tests/test_replica.py
# run when it answers; with DEUZ_REQUIRE_REPLICA=1 they fail when it does not).
REPLICA_URL ?= postgres://postgres@127.0.0.1:5433/test

.PHONY: venv test test-postgres test-postgres-partitioned test-sqlite-new pg-replica run lint docs docs-build bench soak dist clean FORCE

venv: $(VENV)/.installed

PYVERSION := import sys; print("%d.%d" % sys.version_info[:2])
PYTHON_VERSION := $(shell $(PYTHON) -c '$(PYVERSION)' 2>/dev/null)
REQUIREMENTS := Python $(PYTHON_VERSION); $(if $(DJANGO),$(DJANGO),Django as pyproject allows)

# What VENV was installed for: rewritten (and so re-installing) only when it changes.
$(VENV)/.requirements: FORCE
	@mkdir -p $(VENV)
	@printf '%s\n' "$(REQUIREMENTS)" | cmp -s - $@ || printf '%s\n' "$(REQUIREMENTS)" > $@

# Re-installs whenever pyproject.toml, PYTHON's version or DJANGO changes; a VENV of another
# Python version is recreated.
$(VENV)/.installed: pyproject.toml $(VENV)/.requirements
	@test -n "$(PYTHON_VERSION)" || { echo "make: PYTHON='$(PYTHON)' is not a Python that runs" >&2; exit 1; }
	if [ "$$($(BIN)/python -c '$(PYVERSION)' 2>/dev/null)" != "$(PYTHON_VERSION)" ]; then \
		$(PYTHON) -m venv --clear $(VENV) && printf '%s\n' "$(REQUIREMENTS)" > $(VENV)/.requirements; \
	fi
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e '.[dev]' $(if $(DJANGO),'$(DJANGO)')
	touch $@

test: venv
	$(BIN)/pytest $(PYTEST_ARGS)

test-postgres: venv
	DATABASE_URL=$(POSTGRES_URL) REPLICA_DATABASE_URL=$(REPLICA_URL) DEUZ_REQUIRE_POSTGRES=1 $(BIN)/pytest $(PYTEST_ARGS)

# The whole suite on PostgreSQL with the message table hash-partitioned by tenant
# (TENANT_KEY userId; partition_transcripts, docs/scaling.md), but for the tests that
# migrate this app back past 0004 (the tenant is the partition key then) and the standby's
# (`make test-postgres` runs those). Test databases of their own: this run never drops
# another run's.
PARTITIONED_TESTS ?= tests --ignore=tests/test_migrations.py --ignore=tests/test_replica.py \
	--deselect tests/test_role_tokens.py::test_migration_0003_adds_role_tokens_to_stored_rows_and_takes_them_back

test-postgres-partitioned: venv
	DATABASE_URL=$(POSTGRES_URL) DEUZ_REQUIRE_POSTGRES=1 DEUZ_TEST_PARTITIONS=8 \
		DEUZ_TENANT_KEY=userId TEST_DATABASE_NAME=test_deuz_transcripts_partitioned \
		OTHER_TEST_DATABASE_NAME=test_deuz_transcripts_partitioned_other \
		$(BIN)/pytest $(PYTEST_ARGS) $(PARTITIONED_TESTS)

# A PostgreSQL 15 hot standby of the local cluster on 127.0.0.1:5433 (root; idempotent).
pg-replica:
	.ci/pg_replica.sh

# The SQLite tests again on a newer SQLite than the system's (FTS5 `secure-delete` needs
# 3.42+; Debian 12 has 3.40): the pysqlite3-binary wheel, installed beside the venv (not
# into it) and swapped in for `sqlite3` by testproject/settings.py (DEUZ_SQLITE_MODULE).
SQLITE_NEW := .sqlite-new
SQLITE_NEW_TESTS ?= tests/test_deletes.py tests/test_contract_sql.py tests/test_concurrency.py

$(SQLITE_NEW)/.installed:
	$(BIN)/python -m pip install --target $(SQLITE_NEW) pysqlite3-binary
	touch $@

test-sqlite-new: venv $(SQLITE_NEW)/.installed
	PYTHONPATH=$(SQLITE_NEW) DEUZ_SQLITE_MODULE=pysqlite3 $(BIN)/pytest $(PYTEST_ARGS) $(SQLITE_NEW_TESTS)

# The demo's address: `make run PORT=8001` (HOST=0.0.0.0 serves other machines too).
HOST ?= 127.0.0.1
PORT ?= 8000

# `make run CJK_BIGRAMS=1`: the demo indexes and searches Chinese, Japanese and Thai by
# bigrams (DEUZ_CJK_BIGRAMS, read by testproject/settings.py; a demo loaded without is
# re-indexed).
run: export DEUZ_CJK_BIGRAMS = $(CJK_BIGRAMS)

run: venv
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py load_demo_transcripts --if-empty --url http://$(HOST):$(PORT)
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The documentation site (mkdocs.yml, docs/): the docs extra is installed once, on demand.
# `make docs` serves it with live reload on 127.0.0.1:DOCS_PORT; `make docs-build` builds it
# into site/ in strict mode (a broken link, anchor or API reference fails), as .ci/run does.
DOCS_PORT ?= 8001

$(VENV)/.docs-installed: pyproject.toml $(VENV)/.installed
	$(BIN)/pip install -e '.[dev,docs]' $(if $(DJANGO),'$(DJANGO)')
	touch $@

docs: venv $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

docs-build: venv $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The bench extras (peers: django-watson, modelsearch, tantivy) are installed once, on demand.
$(VENV)/.bench-installed: pyproject.toml $(VENV)/.installed
	$(BIN)/pip install -e '.[dev,bench]'
	touch $@

bench: venv $(VENV)/.bench-installed
	$(BIN)/python -m bench $(BENCH_ARGS)

# The soak (soak/, docs/guarantees.md "Soak"): load and faults for SOAK_SECONDS on SOAK_DB
# (postgres: root, on its own cluster `soak` 127.0.0.1:5440 and standby 5441, made on first
# use; never the clusters on 5432/5433), then every invariant checked; exit 1 if one broke.
SOAK_DB ?= postgres
SOAK_SECONDS ?= 60
SOAK_ARGS ?=

$(VENV)/.soak-installed: pyproject.toml $(VENV)/.installed
	$(BIN)/pip install -e '.[dev,soak]'
	touch $@

soak: venv $(VENV)/.soak-installed
	$(BIN)/python -m soak --db $(SOAK_DB) --seconds $(SOAK_SECONDS) $(SOAK_ARGS)

# The sdist and the wheel in dist/, their metadata checked (twine check); .ci/run then
# installs the wheel into a fresh virtualenv (ci/package_smoke.py).
dist: venv
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/python -m twine check --strict dist/*

clean:
	rm -rf .venv .venv-* build dist site *.egg-info .pytest_cache .hypothesis .ruff_cache staticfiles bench/out $(SQLITE_NEW)
	rm -f db.sqlite3 db.sqlite3-journal db.sqlite3-wal db.sqlite3-shm
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
