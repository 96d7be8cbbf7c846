package nsreplay.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (checksums and all), except that permissions are set through java.nio.
 *
 * <p>Without Hadoop's native library (pyspark ships none), {@link RawLocalFileSystem#setPermission}
 * starts a {@code chmod} process, and Hadoop sets the permission of every directory it makes and of
 * every file it creates: a write of a few hundred Parquet files starts over a thousand processes
 * (bench-day: 1,442, about 5 ms of CPU each). This class gives the same permissions without them.
 *
 * <p>Contract: the same file and directory modes as Hadoop's own local file system. A mode with
 * bits that POSIX file permissions cannot express (sticky, setuid, setgid) is left to Hadoop's
 * own implementation.
 */
public class NioLocalFileSystem extends LocalFileSystem {

  public NioLocalFileSystem() {
    super(new Raw());
  }

  /** The raw (checksum-less) file system under {@link NioLocalFileSystem}. */
  public static class Raw extends RawLocalFileSystem {

    /** Permission bits from the lowest (others' execute) to the highest (owner's read). */
    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path path, FsPermission permission) throws IOException {
      int mode = permission.toShort();
      if ((mode & ~0777) != 0) {
        super.setPermission(path, permission);
        return;
      }
      Set<PosixFilePermission> bits = EnumSet.noneOf(PosixFilePermission.class);
      for (int i = 0; i < BITS.length; i++) {
        if ((mode & (1 << i)) != 0) {
          bits.add(BITS[i]);
        }
      }
      Files.setPosixFilePermissions(pathToFile(path).toPath(), bits);
    }
  }
}
