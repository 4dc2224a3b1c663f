"""Paper reproductions and evaluations (PowerTrain, and later Fulcrum, Pagoda, the fleet), above the
twin and the prediction library; they run on emulated boards or on profile files."""
