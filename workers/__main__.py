"""`python -m workers --config-json JSON --slot worker-N`: how the supervisor starts a worker."""

import argparse
import sys

from shared.config import Config
from workers.main import run

parser = argparse.ArgumentParser(prog="python -m workers")
parser.add_argument("--config-json", required=True)
parser.add_argument("--slot", default="worker-1")
args = parser.parse_args()
sys.exit(run(Config.from_json(args.config_json), args.slot))
