from cpverify.probe import main

raise SystemExit(main())
