import sys

from publisher.daemon import main

sys.exit(main())
