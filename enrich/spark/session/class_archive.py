"""The driver JVM's class-data archive: Spark's classes loaded from a mapped file.

A fresh JVM loads and verifies, one by one, the tens of thousands of classes a Spark
session and its first streaming query use: most of a local session's start and ~1.5 s of
its first query on a 2-core machine (docs/performance.md, "The class-data archive").
HotSpot's class-data sharing (CDS) keeps them, parsed and verified, in an archive the
next JVM maps at once. :func:`java_options` gives the options for a JVM this driver is
about to start (``session()`` passes them through ``SPARK_SUBMIT_OPTS``, which
spark-submit adds to the driver's command line beside the user's options):

- an archive exists for this JVM's *key* (the Java runtime, pyspark's jars and what
  else puts classes on the driver's class path): ``-XX:SharedArchiveFile``, mapped at
  start;
- none yet: ``-XX:ArchiveClassesAtExit`` writes one when this JVM exits, to a file of its
  own (``KEY.PID.jsa.part``), with the JVM's CDS log (``KEY.PID.log``) beside it; a later
  call adopts the file (renames it to ``KEY.jsa``) only once the log says the JVM wrote it
  whole: a JVM given a truncated archive dies of SIGBUS, so a JVM killed while writing
  must never leave one. One writer at a time (``KEY.lock``, taken again an hour later);
- an archive the JVM cannot use (another class path, another runtime build) is ignored
  by the JVM; the options silence its CDS warnings.

Only for Java 17 or newer (what Spark 4 needs; Java 11 has no ``ArchiveClassesAtExit``).
An archive is 150-220 MB (more with more jars), in ``$ENRICH_CLASS_ARCHIVE_DIR`` or
``$XDG_CACHE_HOME/spark-enrich/jvm`` (``~/.cache/spark-enrich/jvm``); archives unused
for two weeks are removed when a new one is adopted.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

FOLDER_ENV = "ENRICH_CLASS_ARCHIVE_DIR"
# What the JVM's log says once the whole archive is written (HotSpot 17 and later).
WRITTEN = "Written dynamic archive"
QUIET = "-Xlog:cds*=off"  # an archive the JVM cannot use is ignored without a word
LOCK_SECONDS = 3600.0  # a writer's lock older than this is taken over
UNUSED_SECONDS = 14 * 24 * 3600.0  # an archive unused this long is removed
ORPHAN_SECONDS = 24 * 3600.0  # a part whose log is gone is removed this long after
# What else puts classes on the driver's class path (spark-submit's conf and env).
CLASS_PATH_SETTINGS = ("spark.driver.extraClassPath", "spark.jars", "spark.jars.packages")
CLASS_PATH_ENV = ("SPARK_DIST_CLASSPATH", "SPARK_CLASSPATH", "SPARK_SUBMIT_OPTS",
                  "PYSPARK_SUBMIT_ARGS", "HADOOP_CONF_DIR")  # fmt: skip
_PLAIN = re.compile(r"[\w/.@+~-]+")


def java_options(settings: Mapping[str, str], folder: Path | None = None) -> str | None:
    """The options that map this JVM's archive or write it at exit; None when the
    runtime is older than Java 17, another process is writing the archive, the folder
    cannot be written, or the caller chose class-data options of their own."""
    chosen = " ".join([os.environ.get("SPARK_SUBMIT_OPTS", ""),
                       settings.get("spark.driver.extraJavaOptions", "")])  # fmt: skip
    if "SharedArchiveFile" in chosen or "ArchiveClassesAtExit" in chosen or "-Xshare" in chosen:
        return None
    home = java_home()
    if home is None or java_major(home) < 17:
        return None
    folder = (folder or default_folder()).absolute()
    if not _PLAIN.fullmatch(str(folder)):
        return None  # an option string splits at spaces, and -Xlog's file= at ':' and ','
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    name = key(home, settings)
    archive = folder / f"{name}.jsa"
    if archive.exists() or adopt(folder, name):
        with contextlib.suppress(OSError):
            os.utime(archive)  # its last use, for the clean-up of old archives
        return f"-XX:SharedArchiveFile={archive} {QUIET}"
    if not _lock(folder / f"{name}.lock"):
        return None
    stem = folder / f"{name}.{os.getpid()}"
    return (f"-XX:ArchiveClassesAtExit={stem}.jsa.part {QUIET} "
            f"-Xlog:cds+dynamic=info:file={stem}.log")  # fmt: skip


def adopt(folder: Path, name: str) -> bool:
    """Rename a part whose JVM logged it written whole to ``NAME.jsa``; True if one was.
    Removes what a JVM killed while writing left (a part without that line, whose driver
    is gone, an hour on) and archives unused for two weeks."""
    found = False
    for log in folder.glob(f"{name}.*.log"):
        part = log.with_suffix(".jsa.part")
        try:
            written = WRITTEN in log.read_text(errors="replace")
        except OSError:
            continue
        if written and part.exists() and not found:
            os.replace(part, folder / f"{name}.jsa")
            found = True
        elif not written and (_alive(log) or _age(log) < LOCK_SECONDS):
            continue  # its JVM may still be running, or writing the archive
        for left in (part, log):
            left.unlink(missing_ok=True)
    for part in folder.glob(f"{name}.*.jsa.part"):  # a log removed under a running JVM
        if not part.with_suffix("").with_suffix(".log").exists() and _age(part) > ORPHAN_SECONDS:
            part.unlink(missing_ok=True)
    if found:
        (folder / f"{name}.lock").unlink(missing_ok=True)
        _remove_unused(folder, keep=name)
    return found


def key(home: Path, settings: Mapping[str, str]) -> str:
    """What the archive depends on: the runtime's build (its module image), pyspark's
    jars, and the settings and environment that add to the driver's class path."""
    parts = [str(home.resolve())]
    modules = home / "lib" / "modules"
    with contextlib.suppress(OSError):
        stat = modules.stat()
        parts.append(f"{stat.st_size}:{stat.st_mtime_ns}")
    jars = _spark_jars()
    if jars is not None:
        parts.append(str(jars))
        with contextlib.suppress(OSError):
            parts.extend(sorted(p.name for p in jars.iterdir()))
    parts.extend(f"{k}={settings.get(k, '')}" for k in CLASS_PATH_SETTINGS)
    parts.extend(f"{k}={os.environ.get(k, '')}" for k in CLASS_PATH_ENV)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def java_home() -> Path | None:
    """The runtime spark-submit will run: ``JAVA_HOME``, else ``java`` on ``PATH``."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    java = shutil.which("java")
    return Path(java).resolve().parent.parent if java else None


def java_major(home: Path) -> int:
    """The runtime's major version from its ``release`` file (0 when unknown)."""
    try:
        text = (home / "release").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("JAVA_VERSION="):
            version = line.split("=", 1)[1].strip().strip('"')
            head = version.split(".")[0]
            return int(head) if head.isdigit() else 0
    return 0


def default_folder() -> Path:
    if os.environ.get(FOLDER_ENV):
        return Path(os.environ[FOLDER_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "spark-enrich" / "jvm"


def _spark_jars() -> Path | None:
    home = os.environ.get("SPARK_HOME")
    if not home:
        import pyspark

        home = os.path.dirname(pyspark.__file__)
    jars = Path(home) / "jars"
    return jars if jars.is_dir() else None


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return float("inf")


def _fresh(lock: Path) -> bool:
    return _age(lock) < LOCK_SECONDS


def _alive(log: Path) -> bool:
    """Whether the driver that started the log's JVM runs (``KEY.PID.log``)."""
    pid = log.name.split(".")[1]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock(lock: Path) -> bool:
    """Take the writer's lock (a stale one is taken over); False if another holds it."""
    if _fresh(lock):
        return False
    lock.unlink(missing_ok=True)
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except OSError:
        return False  # another process took it first, or the folder is read-only
    with os.fdopen(fd, "w") as out:
        out.write(f"{os.getpid()}\n")
    return True


def _remove_unused(folder: Path, keep: str) -> None:
    now = time.time()
    for archive in folder.glob("*.jsa"):
        if archive.stem == keep:
            continue
        with contextlib.suppress(OSError):
            if now - archive.stat().st_mtime > UNUSED_SECONDS:
                archive.unlink()
