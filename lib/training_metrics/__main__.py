from training_metrics.server import main

main()
