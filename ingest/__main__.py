"""`python -m hookline.ingest [--config-json JSON] [--slot NAME]`: how the supervisor starts ingest.

The supervisor passes the Config in the HOOKLINE_CONFIG_JSON variable (it holds the tokens;
a command line is readable by every local user); --config-json is for tests and manual runs.
"""

import argparse

from hookline.ingest.main import run
from hookline.shared.process.child import exit_process
from hookline.shared.process.lifecycle import child_config_or_exit

parser = argparse.ArgumentParser(prog="python -m hookline.ingest")
parser.add_argument("--config-json", help="the Config as Config.to_json() wrote it "
                    "(default: the HOOKLINE_CONFIG_JSON variable)")
parser.add_argument("--slot", default="ingest", help="process name logged on every line")
args = parser.parse_args()
exit_process(run(child_config_or_exit(args.config_json, args.slot), args.slot))
