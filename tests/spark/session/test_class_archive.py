"""The driver JVM's class-data archive: written whole by the first JVM, adopted only once
its JVM logged it written, mapped by the next; never a part a killed JVM left.

The rules run against a runtime folder of the test's own (its ``release`` file names
the version); the real JVM (``java`` on the machine) writes, adopts and maps an archive,
and a local Spark session maps the one its predecessor wrote.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import enrich.spark
from tests.spark.conftest import spark_env

# ``enrich.spark.session`` is the package's function: resolved before the submodule is
# imported (importing the package directly first would bind the module over the name).
assert callable(enrich.spark.session)
class_archive = importlib.import_module("enrich.spark.session.class_archive")
WRITTEN = class_archive.WRITTEN
java_options = class_archive.java_options

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Java 17 runtime's folder (what the rules read of it: release, lib/modules)."""
    home = tmp_path / "jdk"
    (home / "lib").mkdir(parents=True)
    (home / "lib" / "modules").write_bytes(b"modules")
    (home / "release").write_text('IMPLEMENTOR="test"\nJAVA_VERSION="17.0.9"\n')
    monkeypatch.setenv("JAVA_HOME", str(home))
    for name in class_archive.CLASS_PATH_ENV:
        monkeypatch.delenv(name, raising=False)
    return home


def _written(folder: Path, options: str) -> Path:
    """What a JVM given ``options`` leaves when it exits: the part and its log's line."""
    part = Path(options.split("ArchiveClassesAtExit=", 1)[1].split()[0])
    part.write_bytes(b"\xa8\xab\x0b\xf0" + b"\0" * 64)
    part.with_suffix("").with_suffix(".log").write_text(f"[info][cds,dynamic] {WRITTEN} 0x0\n")
    return part


def test_the_first_jvm_writes_the_archive_and_the_next_maps_it(
    runtime: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "archives"
    first = java_options({}, folder)
    assert first is not None and "-XX:ArchiveClassesAtExit=" in first
    assert f".{os.getpid()}.jsa.part" in first and "-Xlog:cds*=off" in first
    assert java_options({}, folder) is None  # one writer at a time
    _written(folder, first)
    then = java_options({}, folder)
    assert then is not None and then.startswith("-XX:SharedArchiveFile=")
    archive = Path(then.split("=", 1)[1].split()[0])
    assert archive.exists() and archive.parent == folder
    assert sorted(p.name for p in folder.iterdir()) == [archive.name]  # part, log, lock gone
    assert java_options({}, folder) == then


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_part_its_jvm_did_not_log_written_is_never_mapped(runtime: Path, tmp_path: Path) -> None:
    folder = tmp_path / "archives"
    folder.mkdir()
    name = class_archive.key(runtime, {})
    parts = {}
    for driver in (os.getpid(), _dead_pid()):  # a JVM killed mid-write, its driver running / gone
        part = folder / f"{name}.{driver}.jsa.part"
        part.write_bytes(b"\xa8\xab\x0b\xf0" + b"\0" * 64)
        part.with_suffix("").with_suffix(".log").write_text("[info][cds] Dumping shared data\n")
        parts[driver] = part
    (folder / f"{name}.lock").write_text("1\n")
    assert java_options({}, folder) is None  # not adopted; the writer's lock is held
    assert all(part.exists() for part in parts.values())
    hours_ago = time.time() - 2 * class_archive.LOCK_SECONDS
    for path in folder.iterdir():
        os.utime(path, (hours_ago, hours_ago))
    again = java_options({}, folder)  # an hour on: a new writer, never the parts
    assert again is not None and "ArchiveClassesAtExit" in again
    assert not list(folder.glob("*.jsa"))
    running, gone = parts.values()
    assert running.exists()  # its driver still runs: its JVM may yet write it
    assert not gone.exists() and not gone.with_suffix("").with_suffix(".log").exists()


def test_the_key_follows_the_class_path_and_the_runtime(
    runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = class_archive.key(runtime, {})
    assert class_archive.key(runtime, {}) == base
    assert class_archive.key(runtime, {"spark.jars": "/x/delta.jar"}) != base
    assert class_archive.key(runtime, {"spark.driver.extraClassPath": "/x"}) != base
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", "/hadoop/*")
    assert class_archive.key(runtime, {}) != base
    monkeypatch.delenv("SPARK_DIST_CLASSPATH")
    (runtime / "lib" / "modules").write_bytes(b"another build")
    assert class_archive.key(runtime, {}) != base


def test_none_before_java_17_for_the_callers_own_cds_or_an_odd_folder(
    runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "archives"
    assert java_options({"spark.driver.extraJavaOptions": "-Xshare:off"}, folder) is None
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:SharedArchiveFile=/mine.jsa")
    assert java_options({}, folder) is None
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    assert java_options({}, tmp_path / "with space") is None
    assert java_options({}, tmp_path / "a:b") is None
    (runtime / "release").write_text('JAVA_VERSION="11.0.2"\n')
    assert java_options({}, folder) is None
    (runtime / "release").unlink()
    assert java_options({}, folder) is None
    assert not folder.exists() or not any(folder.iterdir())


def test_archives_unused_for_two_weeks_go_when_a_new_one_comes(
    runtime: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "archives"
    folder.mkdir()
    old, recent = folder / "0000000000000000.jsa", folder / "1111111111111111.jsa"
    for path in (old, recent):
        path.write_bytes(b"x")
    weeks_ago = time.time() - class_archive.UNUSED_SECONDS - 60
    os.utime(old, (weeks_ago, weeks_ago))
    options = java_options({}, folder)
    assert options is not None
    _written(folder, options)
    assert java_options({}, folder) is not None
    assert not old.exists() and recent.exists()


def test_a_real_jvm_writes_an_archive_the_next_one_maps(tmp_path: Path) -> None:
    home = class_archive.java_home()
    if home is None or class_archive.java_major(home) < 17:
        pytest.skip("no Java 17 or newer runtime")
    java = str(home / "bin" / "java")
    folder = tmp_path / "archives"
    first = java_options({}, folder)
    assert first is not None and "ArchiveClassesAtExit" in first
    done = subprocess.run([java, *first.split(), "-version"], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stdout + done.stderr
    then = java_options({}, folder)
    assert then is not None and "SharedArchiveFile" in then
    # -Xshare:on refuses to start without the archive mapped
    done = subprocess.run([java, *then.split(), "-Xshare:on", "-version"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in done.stdout + done.stderr


# A driver: a local session, and whether its JVM mapped an archive of the folder.
DRIVER = """
import json, os, sys
from enrich.spark import session

spark = session("enrich-class-archive-test", "local[1]", spark__ui__enabled="false",
                class_archive=sys.argv[1] == "on")
jvm = spark.sparkContext._gateway.proc.pid
with open(f"/proc/{jvm}/maps") as maps:
    mapped = [line.split()[-1] for line in maps if os.environ["ENRICH_CLASS_ARCHIVE_DIR"] in line]
rows = spark.range(5).count()
print(json.dumps({"mapped": sorted(set(mapped)), "rows": rows}))
"""


def _driver(folder: Path, mode: str) -> dict[str, object]:
    env = dict(os.environ, **spark_env(), ENRICH_CLASS_ARCHIVE_DIR=str(folder))
    done = subprocess.run([sys.executable, "-c", DRIVER, mode], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=280)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_a_local_session_maps_the_archive_its_predecessor_wrote(tmp_path: Path) -> None:
    folder = tmp_path / "archives"
    assert _driver(folder, "off") == {"mapped": [], "rows": 5}
    assert not folder.exists() or not any(folder.iterdir())
    first = _driver(folder, "on")
    assert first["rows"] == 5 and first["mapped"] == []
    # its JVM writes the archive as it exits, after the driver: await the log's line
    deadline = time.monotonic() + 240
    while not any(WRITTEN in log.read_text(errors="replace") for log in folder.glob("*.log")):
        assert time.monotonic() < deadline, sorted(p.name for p in folder.iterdir())
        time.sleep(0.2)
    second = _driver(folder, "on")
    archives = [str(p) for p in folder.glob("*.jsa")]
    assert len(archives) == 1
    assert second == {"mapped": archives, "rows": 5}
