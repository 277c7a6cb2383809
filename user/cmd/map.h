/* `dra-cpu-driver map`: the node picture in the terminal (see map.c). */
#pragma once

/* argv[0] is "map". Returns the process exit code. */
int map_main(int argc, char **argv);
