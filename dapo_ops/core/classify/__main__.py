"""``python -m dapo_ops.core.classify LOGFILE [--exit-code N]`` (the verdict as JSON) or
``python -m dapo_ops.core.classify --troubleshooting-md`` (prints docs/troubleshooting.md).

STDLIB ONLY (runs inside the training container). Exit 0 with the output; 2 with one line on stderr for a bad
argument or an unreadable file.
"""

from __future__ import annotations

import json
import sys

from dapo_ops.core import classify


def main(argv: list[str]) -> int:
    """Run the module CLI on ``argv`` (without the program name); returns the exit status."""
    if argv[:1] == ["--troubleshooting-md"]:
        sys.stdout.write(classify.troubleshooting_md())
        return 0
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m dapo_ops.core.classify LOGFILE [--exit-code N] | --troubleshooting-md")
        return 0 if argv else 2
    path, ec = argv[0], None
    if "--exit-code" in argv[1:]:
        try:
            ec = int(argv[argv.index("--exit-code") + 1])
        except (IndexError, ValueError):
            print("classify: --exit-code needs an integer, e.g. --exit-code 137", file=sys.stderr)
            return 2
    try:
        v = classify.classify_file(path, exit_code=ec)
    except OSError as exc:
        print(f"classify: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(json.dumps(v.to_json(), indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
