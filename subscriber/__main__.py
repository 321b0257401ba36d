import sys

from subscriber.daemon import main

sys.exit(main())
