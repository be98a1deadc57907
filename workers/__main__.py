"""`python -m hookline.workers [--config-json JSON] --slot worker-N`: how the supervisor starts a
worker (the Config comes in HOOKLINE_CONFIG_JSON unless --config-json is given)."""

import argparse

from hookline.shared.process.child import exit_process
from hookline.shared.process.lifecycle import child_config_or_exit
from hookline.workers.main import run

parser = argparse.ArgumentParser(prog="python -m hookline.workers")
parser.add_argument("--config-json", help="default: the HOOKLINE_CONFIG_JSON variable")
parser.add_argument("--slot", default="worker-1")
args = parser.parse_args()
exit_process(run(child_config_or_exit(args.config_json, args.slot), args.slot))
