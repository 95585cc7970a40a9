"""FSDP / ZeRO: parameters, gradients and optimizer state sharded across data-parallel ranks."""
