"""`python -m workers [--config-json JSON] --slot worker-N`: how the supervisor starts a
worker (the Config comes in HOOKLINE_CONFIG_JSON unless --config-json is given)."""

import argparse
import os
import sys

from shared.config import Config
from shared.errors import ConfigError
from shared.lifecycle import BOOT_ERROR_EXIT
from shared.logs import configure_logging, get_logger
from workers.main import run

parser = argparse.ArgumentParser(prog="python -m workers")
parser.add_argument("--config-json", help="default: the HOOKLINE_CONFIG_JSON variable")
parser.add_argument("--slot", default="worker-1")
args = parser.parse_args()
try:
    config = Config.for_child(args.config_json, os.environ)
except ConfigError as exc:
    configure_logging(args.slot)
    get_logger().error("boot_failed", reason=str(exc))
    sys.exit(BOOT_ERROR_EXIT)
sys.exit(run(config, args.slot))
