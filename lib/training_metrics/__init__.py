"""Job counters per kind and namespace, served beside the ansible-operator runtime."""
