from coworkgym.cli import main

main()
