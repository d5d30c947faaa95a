"""AddOnDeploymentConfig handling: which config applies, its spec hash, its values, the install namespace."""
