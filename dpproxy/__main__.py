from dpproxy.cli import main

main()
