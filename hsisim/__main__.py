from hsisim.cli import main

main()
