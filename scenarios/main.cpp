// main.cpp: scenario_<name>, one study of scenarios/studies/<name>.yaml (DTLAB_STUDY_FILE, set per executable by
// scenarios/CMakeLists.txt) run by the shared runner.
#include "scenarios/runner.hpp"

int main(int argc, char** argv) { return dtlab::run_study(DTLAB_STUDY_FILE, argc, argv); }
