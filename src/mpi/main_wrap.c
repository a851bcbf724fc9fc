/* libweft-mpi-main.a: what weft-mpicc links with -Wl,--wrap=main. The C
 * library's start code calls main, which the linker makes __wrap_main;
 * the program's own main is __real_main, run as every rank by libweft-mpi
 * (ranks.cpp). main keeps its own rules (in C++ and C99, falling off its
 * end returns 0), since it stays the function the program defined. C, so
 * that a C program needs no C++ runtime to link it. */
int __real_main(int, char**, char**);
int weft_mpi_run(int argc, char** argv, char** envp, int (*main_fn)(int, char**, char**));
int __wrap_main(int argc, char** argv, char** envp);

int __wrap_main(int argc, char** argv, char** envp) {
  return weft_mpi_run(argc, argv, envp, &__real_main);
}
