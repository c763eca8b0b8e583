// The main of every lab program: the variant comes from the registry (LAB_VARIANT in its file).
#include "lab/harness.hpp"

int main(int argc, char** argv) { return lab::run_main(argc, argv); }
