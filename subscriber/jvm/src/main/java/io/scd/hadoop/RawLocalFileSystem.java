package io.scd.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's raw local filesystem without the shell commands it starts when its native library
 * (libhadoop, which pyspark does not ship) is missing: a {@code chmod} for every file it creates
 * and a {@code readlink} for every file a FileContext renames. A small Delta commit made 22 of
 * them, each a process started by the JVM: a third of the commit's time on 2 cores.
 *
 * <p>The same calls through Java's file API instead; everything else is Hadoop's.
 */
public class RawLocalFileSystem extends org.apache.hadoop.fs.RawLocalFileSystem {
  private static final PosixFilePermission[] BITS = {
    PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
    PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE,
    PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
    PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
    PosixFilePermission.OWNER_READ,
  };

  /** The permission's rwx bits, as {@code chmod} would set them (Java sets no sticky bit). */
  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission.toShort()));
  }

  static Set<PosixFilePermission> posix(short mode) {
    Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
    for (int bit = 0; bit < BITS.length; bit++) {
      if ((mode & (1 << bit)) != 0) {
        set.add(BITS[bit]);
      }
    }
    return set;
  }

  /**
   * A path that is no symbolic link has its file status, which is what Hadoop answers once its
   * {@code readlink} found no link; a link goes to Hadoop's own code.
   */
  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    if (Files.isSymbolicLink(pathToFile(f).toPath())) {
      return super.getFileLinkStatus(f);
    }
    return getFileStatus(f);
  }
}
