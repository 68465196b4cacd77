"""Check that every relative link of a Markdown file names a file that exists.

``python scripts/readme_links.py README.md``: exit 1, naming each broken link, when a
link such as ``[docs](docs/jobs.md#the-format)`` points to a path missing from the
repository. MkDocs checks the pages under docs/; the README is not one of them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def broken_links(path: Path) -> list[str]:
    """The relative link targets of ``path`` (outside code blocks) that do not exist."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:|^#", target):
            continue
        if not (path.parent / target.split("#", 1)[0]).exists():
            broken.append(target)
    return broken


def main(argv: list[str]) -> int:
    failed = False
    for name in argv:
        for target in broken_links(Path(name)):
            print(f"{name}: broken link {target!r}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
