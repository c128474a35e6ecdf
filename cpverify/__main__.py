from cpverify.cli import main

raise SystemExit(main())
