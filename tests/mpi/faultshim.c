/* faultshim.c — preloaded into ckpz-mpi by tests/mpi/mpi.sh (through mpirun -x
 * LD_PRELOAD) to make the writes fail on one rank, as a full disk or an I/O error on
 * one node would: MPI's profiling interface lets it stand in for MPI_File_write_at (the
 * ranks write independently) and call the real one (PMPI_) on the other ranks.
 * CKPZ_FAULT_WRITE_RANK names the rank. */
#include <mpi.h>
#include <stdlib.h>

int MPI_File_write_at(MPI_File fh, MPI_Offset off, const void *buf, int count, MPI_Datatype dt, MPI_Status *st)
{
    const char *r = getenv("CKPZ_FAULT_WRITE_RANK");
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (r && atoi(r) == rank && count > 0) return MPI_ERR_IO;
    return PMPI_File_write_at(fh, off, buf, count, dt, st);
}
