// Placeholder: the bridge runtime is being built.
