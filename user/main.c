#include <stdio.h>
int main(void)
{
	puts("dra-cpu-driver");
	return 0;
}
