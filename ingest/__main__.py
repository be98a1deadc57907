"""`python -m ingest [--config-json JSON] [--slot NAME]`: how the supervisor starts ingest.

The supervisor passes the Config in the HOOKLINE_CONFIG_JSON variable (it holds the tokens;
a command line is readable by every local user); --config-json is for tests and manual runs.
"""

import argparse
import os
import sys

from ingest.main import run
from shared.config import Config
from shared.errors import ConfigError
from shared.lifecycle import BOOT_ERROR_EXIT
from shared.logs import configure_logging, get_logger

parser = argparse.ArgumentParser(prog="python -m ingest")
parser.add_argument("--config-json", help="the Config as Config.to_json() wrote it "
                    "(default: the HOOKLINE_CONFIG_JSON variable)")
parser.add_argument("--slot", default="ingest", help="process name logged on every line")
args = parser.parse_args()
try:
    config = Config.for_child(args.config_json, os.environ)
except ConfigError as exc:
    # A bad config never gets better by respawning: report it as a boot failure.
    configure_logging(args.slot)
    get_logger().error("boot_failed", reason=str(exc))
    sys.exit(BOOT_ERROR_EXIT)
sys.exit(run(config, args.slot))
