from torchfix_core._doctor import main

raise SystemExit(main())
