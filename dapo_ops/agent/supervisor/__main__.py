"""``python3 -m dapo_ops.agent.supervisor RUN_DIR [--command-factory module:function]`` (see the package)."""

import sys

from dapo_ops.agent.supervisor.machine import main

if __name__ == "__main__":  # pragma: no cover - run as a subprocess in tests
    sys.exit(main())
