"""Servers on 127.0.0.1 started and stopped by PID (llama.cpp, vLLM, exactspec's own generators and mutants) and
the engine level's mutant zoo."""
