"""What an agent was given: recording each search as a recall (with its step's
namespace), building a context window from recalled memories, and marks
(a researcher's good/bad verdict on a memory or step)."""
