"""PowerTrain's evaluations: transfer accuracy against k, references and boards; mode choices."""
