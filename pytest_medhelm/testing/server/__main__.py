"""``python -m pytest_medhelm.testing.server``: the test server from a shell (:mod:`.cli`)."""

import sys

from pytest_medhelm.testing.server.cli import main

sys.exit(main())
