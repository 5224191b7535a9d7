/* Unit tests for proto/ident.c: a process's job and rank from the
 * variables torchrun, srun, Open MPI and PMI set, in an environment block
 * as /proc/<pid>/environ holds it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ident.h"

#define BLOCK(s) s, sizeof(s) - 1 /* keeps the NULs inside, drops the last */

static void test_torchrun(void **state)
{
	static const char env[] = "PATH=/bin\0RANK=3\0LOCAL_RANK=1\0WORLD_SIZE=8\0"
	                          "TORCHELASTIC_RUN_ID=abc\0";
	struct ident id;

	(void)state;
	ident_read_environ(&id, BLOCK(env));
	assert_int_equal(id.rank, 3);
	assert_int_equal(id.local_rank, 1);
	assert_int_equal(id.world_size, 8);
	assert_string_equal(id.job_id, "abc");
}

static void test_srun_and_preference(void **state)
{
	/* srun's names; GPROF_JOB_ID beats SLURM_JOB_ID; RANK beats SLURM_PROCID */
	static const char srun[] = "SLURM_PROCID=12\0SLURM_LOCALID=4\0SLURM_NTASKS=16\0"
	                           "SLURM_JOB_ID=777\0";
	static const char both[] = "SLURM_PROCID=12\0RANK=2\0SLURM_JOB_ID=777\0GPROF_JOB_ID=mine\0";
	struct ident id;

	(void)state;
	ident_read_environ(&id, BLOCK(srun));
	assert_int_equal(id.rank, 12);
	assert_int_equal(id.local_rank, 4);
	assert_int_equal(id.world_size, 16);
	assert_string_equal(id.job_id, "777");
	ident_read_environ(&id, BLOCK(both));
	assert_int_equal(id.rank, 2);
	assert_string_equal(id.job_id, "mine");
}

static void test_bad_values_ignored(void **state)
{
	/* not numbers, negative, empty, a prefix of a longer name, a value in
	 * another's value, an unterminated last entry: all unknown (-1) */
	static const char env[] = "RANK=x1\0LOCAL_RANK=-1\0WORLD_SIZE=\0RANKS=5\0"
	                          "FOO=RANK=6\0SLURM_PROCID=9";
	struct ident id;

	(void)state;
	ident_read_environ(&id, env, sizeof(env) - 1);
	assert_int_equal(id.rank, -1);
	assert_int_equal(id.local_rank, -1);
	assert_int_equal(id.world_size, -1);
	assert_string_equal(id.job_id, "");
	ident_read_environ(&id, "", 0);
	assert_int_equal(id.rank, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_torchrun),
		cmocka_unit_test(test_srun_and_preference),
		cmocka_unit_test(test_bad_values_ignored),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
