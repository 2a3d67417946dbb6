from tilefoundry.cli import main

raise SystemExit(main())
