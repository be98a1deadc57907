"""Process plumbing for supervised children: lifecycle files, child run loop, faults, clock."""
