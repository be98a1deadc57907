"""`python -m ingest --config-json JSON [--slot NAME]`: how the supervisor starts ingest."""

import argparse
import sys

from ingest.main import run
from shared.config import Config
from shared.errors import ConfigError
from shared.lifecycle import BOOT_ERROR_EXIT
from shared.logs import configure_logging, get_logger

parser = argparse.ArgumentParser(prog="python -m ingest")
parser.add_argument("--config-json", required=True, help="the Config as Config.to_json() wrote it")
parser.add_argument("--slot", default="ingest", help="process name logged on every line")
args = parser.parse_args()
try:
    config = Config.from_json(args.config_json)
except (ConfigError, ValueError, TypeError, AttributeError) as exc:  # not JSON / not an object
    # A bad config never gets better by respawning: report it as a boot failure.
    configure_logging(args.slot)
    get_logger().error("boot_failed", reason=f"invalid --config-json: {exc}")
    sys.exit(BOOT_ERROR_EXIT)
sys.exit(run(config, args.slot))
