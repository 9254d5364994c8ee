/* The tensorjit command: placeholder main until the CLI lands. */
#include <stdio.h>
#include <string.h>

#include "../include/tensorjit.h"

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("tensorjit %s\n", tj_version());
    return 0;
  }
  printf("usage: tensorjit [options] '<expression>'\n");
  return 0;
}
