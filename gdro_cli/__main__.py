import sys

from gdro_cli.main import main

sys.exit(main())
