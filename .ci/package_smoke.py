"""Install the built wheel as a user would and use it: CI's packaging smoke test.

    python .ci/package_smoke.py dist/deuz_transcripts-X-py3-none-any.whl \\
        --python 3.11=/path/to/python3.11:5.2 --python 3.13=/path/to/python3.13:6.0

Checks the wheel's metadata (version, MIT licence and its file, classifiers claiming
exactly the Python and Django releases CI runs, the Django requirement), that the
templates, static files, migrations and ``py.typed`` are in it, then for each interpreter:
a fresh virtualenv in a temporary directory (away from the source tree, so only the
installed wheel can be imported), ``pip install <wheel>[postgres]``, and a tiny project
on SQLite that runs ``check``, ``migrate``, writes a chat and finds it through the public
API. Prints one line per step; exits non-zero on the first failure.
"""

from __future__ import annotations

import argparse
import email
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path

REQUIRED_FILES = (
    "deuz_transcripts/__init__.py",
    "deuz_transcripts/py.typed",
    "deuz_transcripts/migrations/0001_initial.py",
    "deuz_transcripts/templates/admin/deuz_transcripts/search.html",
    "deuz_transcripts/static/deuz_transcripts/transcripts.css",
)

SETTINGS = """
SECRET_KEY = "package-smoke"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "deuz_transcripts",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": "smoke.sqlite3",
        "OPTIONS": {"transaction_mode": "IMMEDIATE"},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
"""

USE = """
import django, importlib.metadata, os
os.environ["DJANGO_SETTINGS_MODULE"] = "smoke_settings"
django.setup()

import deuz_transcripts
from deuz_transcripts import ChatRecord
from deuz_transcripts.signals import chat_indexed
from deuz_transcripts.stores import DjangoConditionalChatStore

assert deuz_transcripts.__file__.startswith(os.environ["VENV"]), deuz_transcripts.__file__
assert importlib.metadata.version("deuz-transcripts") == deuz_transcripts.__version__
indexed = []
chat_indexed.connect(lambda sender, chat_id, **kwargs: indexed.append(chat_id), weak=False)
chats = DjangoConditionalChatStore()
chats.write_chat(
    ChatRecord("chat-1", {"userId": "ada"}, [{"role": "user", "content": "Book the flight to Izmir."}]),
    expected_revision=0,
)
hits = chats.transcript.search({"userId": "ada"}, "izmir flight")
assert [h.message_id for h in hits] == ["chat-1:0"], hits
assert chats.transcript.search({"userId": "bob"}, "izmir") == []
assert indexed == ["chat-1"], indexed
print(
    f"searched with deuz-transcripts {deuz_transcripts.__version__}, Django {django.__version__},"
    f" backend {chats.transcript.backend_name}"
)
"""


def fail(message: str) -> None:
    print(f"package smoke: FAILED: {message}", flush=True)
    sys.exit(1)


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(arg) for arg in args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        fail(f"{' '.join(map(str, args))} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def check_wheel(wheel: Path, matrix: dict[str, tuple[str, str]]) -> None:
    """The files and the metadata a user (and a company's licence scanner) reads."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        missing = [name for name in REQUIRED_FILES if name not in names]
        if missing:
            fail(f"the wheel lacks {missing}")
        metadata_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = email.message_from_bytes(archive.read(metadata_name))
        licence_files = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    if metadata["Name"] != "deuz-transcripts":
        fail(f"Name is {metadata['Name']!r}")
    if metadata["License-Expression"] != "MIT" or not licence_files:
        fail("the wheel lacks License-Expression: MIT or its LICENSE file")
    classifiers = metadata.get_all("Classifier") or []
    claimed_pythons = {
        c.rsplit(" ", 1)[1]
        for c in classifiers
        if c.startswith("Programming Language :: Python :: 3.")
    }
    claimed_djangos = {
        c.rsplit(" ", 1)[1] for c in classifiers if c.startswith("Framework :: Django :: ")
    }
    run_pythons = set(matrix)
    run_djangos = {django for _, django in matrix.values()}
    if claimed_pythons != run_pythons or claimed_djangos != run_djangos:
        fail(
            f"the classifiers claim Python {sorted(claimed_pythons)} and Django "
            f"{sorted(claimed_djangos)}; CI runs Python {sorted(run_pythons)} and Django "
            f"{sorted(run_djangos)}: make pyproject.toml's classifiers say what CI runs"
        )
    print(
        f"package smoke: {wheel.name}: files, licence (MIT) and classifiers (Python "
        f"{', '.join(sorted(run_pythons))}; Django {', '.join(sorted(run_djangos))}) ok",
        flush=True,
    )


def use_wheel(wheel: Path, label: str, python: str, django: str) -> None:
    """What pip resolves from the wheel's own requirements, as a user gets it."""
    with tempfile.TemporaryDirectory(prefix="deuz-package-smoke-") as tmp:
        project = Path(tmp)
        venv = project / "venv"
        run(python, "-m", "venv", venv, cwd=project)
        bin_dir = venv / "bin"
        run(
            bin_dir / "python", "-m", "pip", "install", "--quiet", f"{wheel}[postgres]", cwd=project
        )
        (project / "smoke_settings.py").write_text(textwrap.dedent(SETTINGS))
        (project / "use_it.py").write_text(textwrap.dedent(USE))
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "VENV": str(venv), "PYTHONPATH": str(project)}
        admin = [bin_dir / "django-admin"]
        run(*admin, "check", "--settings=smoke_settings", cwd=project, env=env)
        run(*admin, "migrate", "--noinput", "--settings=smoke_settings", cwd=project, env=env)
        said = run(bin_dir / "python", "use_it.py", cwd=project, env=env).strip()
        if f"Django {django}." not in said:
            fail(f"pip installed another Django than {django} on Python {label}: {said}")
        print(
            f"package smoke: Python {label}: fresh venv, pip install wheel[postgres], migrate, {said}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument(
        "--python",
        action="append",
        required=True,
        metavar="X.Y=PATH:DJANGO",
        help="an interpreter CI runs, and the Django release it runs on it",
    )
    args = parser.parse_args()
    matrix: dict[str, tuple[str, str]] = {}
    for given in args.python:
        label, _, rest = given.partition("=")
        path, _, django = rest.rpartition(":")
        matrix[label] = (path, django)
    wheel = args.wheel.resolve()
    check_wheel(wheel, matrix)
    for label, (path, django) in matrix.items():
        use_wheel(wheel, label, path, django)


if __name__ == "__main__":
    main()
