// The target that builds the GoogleTest programs' shared precompiled header
// (cmake/TestFlags.cmake); it is never run.
int main() { return 0; }
